"""Run pytest under coverage.py, tracing what can still find a line or branch not yet seen.

    python3 scripts/_traced_pytest.py [--every-case] SOURCE -- PYTEST_ARGS...

scripts/test measures each package's branch coverage on its own tests. On Python 3.11
coverage.py can measure branches only with its C tracer (sys.settrace), and while a
tracer is set the interpreter runs every instruction of every module (pytest, trio, the
standard library, not only SOURCE) on its slow tracing path: a test run under
``coverage run`` took about twice the CPU of the same run without it. Much of that is
repetition: the thousandth case of a corpus and the hundredth example of a Hypothesis
test run the lines the first ones ran.

So coverage (started before collection, so every module of SOURCE is measured from
its import on) is paused:

- between tests, while pytest reports (its own code, never SOURCE);
- for the repetitive: the cases of one parametrized test function, and the examples
  of one Hypothesis test, are traced until ``QUIET`` of them in a row have added no
  arc (no line or branch transition coverage had not seen); then only every
  ``SAMPLE``-th is traced, and one that adds an arc makes them all traced again.

With ``--every-case`` only the first is done: every case and example is traced.

Every test still runs, whole, with every assertion: only whether the tracer watches a
case changes. The setup of a test's first case in a module or class and the teardown of
its last are always traced (fixtures of wider scope start and stop there). COVERAGE_FILE
and [tool.coverage] in pyproject.toml apply as with ``coverage run``. Prints one line:
how many cases and examples ran untraced. Exits with pytest's exit code.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any

import coverage
import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

QUIET = 8
SAMPLE = 8


class _Repetition:
    """When to trace the next case of a run of similar ones (cases, or examples)."""

    def __init__(self) -> None:
        self.quiet = 0  # traced cases in a row that added no arc
        self.skipped = 0  # untraced cases since the last traced one

    def should_trace(self) -> bool:
        if self.quiet < QUIET or self.skipped + 1 >= SAMPLE:
            self.skipped = 0
            return True
        self.skipped += 1
        return False

    def traced(self, added: bool) -> None:
        self.quiet = 0 if added else self.quiet + 1


class Tracing:
    """The pytest plugin: puts the tracer on this thread around what it traces, off elsewhere."""

    def __init__(self, tracer: Any, *, every_case: bool = False) -> None:
        self.tracer = tracer
        self.every_case = every_case
        self.on = True
        self.runs: dict[str, _Repetition] = {}
        self.untraced_cases = 0
        self.untraced_examples = 0
        self.traced_cases = 0

    # Tracing on and off.

    def _set(self, on: bool) -> None:
        if self.tracer is None or on == self.on:
            return
        if on:
            self.tracer.start()
        else:
            self.tracer.stop()
        self.on = on

    def _arcs(self) -> int:
        """How many arcs coverage has seen so far (-1: it cannot say)."""
        data = getattr(self.tracer, "data", None)
        if not isinstance(data, dict):
            return -1
        return sum(len(v) for v in data.values())

    # Which cases run traced.

    def _item_traced(self, item: pytest.Item) -> bool:
        traced = getattr(item, "_prism_traced", None)
        if traced is None:
            key = item.nodeid.split("[", 1)[0]
            traced = self.every_case or self.runs.setdefault(key, _Repetition()).should_trace()
            item._prism_traced = traced  # type: ignore[attr-defined]
            item._prism_arcs = self._arcs()  # type: ignore[attr-defined]
            if traced:
                self.traced_cases += 1
            else:
                self.untraced_cases += 1
        return traced

    @staticmethod
    def _edge(item: pytest.Item, other: pytest.Item | None) -> bool:
        return other is None or other.parent is not item.parent

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            self._set(False)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        self._item_traced(item)
        try:
            return (yield)
        finally:
            self._set(False)
            arcs_before = getattr(item, "_prism_arcs", -1)
            if item._prism_traced and not self.every_case:  # type: ignore[attr-defined]
                key = item.nodeid.split("[", 1)[0]
                arcs = self._arcs()
                self.runs[key].traced(arcs < 0 or arcs > arcs_before)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        first = self._edge(item, getattr(self, "_previous", None))
        self._previous: pytest.Item | None = item
        self._set(first or self._item_traced(item))
        try:
            return (yield)
        finally:
            self._set(False)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        self._set(self._edge(item, nextitem) or self._item_traced(item))
        try:
            return (yield)
        finally:
            self._set(False)

    # pytest-trio wraps a Hypothesis test's inner test in its own pytest_runtest_call
    # wrapper: this one runs after it (trylast) to wrap that in turn.
    @pytest.hookimpl(hookwrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, None]:
        traced = self._item_traced(item)
        handle = getattr(getattr(item, "obj", None), "hypothesis", None)
        inner = getattr(handle, "inner_test", None)
        if traced and not self.every_case and handle is not None and inner is not None:
            handle.inner_test = self._examples(inner)
        self._set(traced)
        try:
            yield
        finally:
            self._set(False)
            if handle is not None and inner is not None:
                handle.inner_test = inner

    def _examples(self, inner: Callable[..., Any]) -> Callable[..., Any]:
        repetition = _Repetition()

        @functools.wraps(inner)
        def example(*args: Any, **kwargs: Any) -> Any:
            traced = repetition.should_trace()
            self._set(traced)
            if not traced:
                self.untraced_examples += 1
                return inner(*args, **kwargs)
            before = self._arcs()
            try:
                return inner(*args, **kwargs)
            finally:
                after = self._arcs()
                repetition.traced(before < 0 or after > before)

        return example

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        self._set(True)  # conftest hooks and session finalizers
        return (yield)


def main(argv: list[str]) -> int:
    every_case = argv[:1] == ["--every-case"]
    if every_case:
        argv = argv[1:]
    if len(argv) < 2 or argv[1] != "--":
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    cov = coverage.Coverage(source=[argv[0]])
    cov.start()
    # The C tracer of this thread (sys.gettrace() gives the tracer object itself): its
    # stop() and start() take it off this thread and put it back, keeping its data.
    # Other threads keep their own tracers. Any other core is never paused.
    tracer = sys.gettrace()
    tracing = Tracing(tracer if type(tracer).__name__ == "CTracer" else None, every_case=every_case)
    try:
        code = pytest.main(argv[2:], plugins=[tracing])
    finally:
        cov.stop()
        cov.save()
    print(
        f"coverage: {tracing.traced_cases} test cases traced, {tracing.untraced_cases}"
        f" not (repetition), {tracing.untraced_examples} Hypothesis examples not"
    )
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
