"""scripts/_traced_pytest.py: coverage keeps what the first cases and examples reach.

One run of a tiny project under the runner: a module whose lines are reached at import,
by the first case of a long parametrized test only, by a lone test, and by a Hypothesis
test; one case deep in the untraced stretch fails, so the run must fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SOURCE = """\
IMPORTED = 1


def classify(n):
    if n == 0:
        return "zero"
    return "many"


def only_once():
    return "once"


def drawn(n):
    if n < 0:
        return -n
    return n
"""

TESTS = """\
import pytest
from hypothesis import given, settings, strategies as st

from mod import classify, drawn, only_once


@pytest.mark.parametrize("n", range(60))
def test_classify(n):
    assert classify(n) == ("zero" if n == 0 else "many")
    assert n != 47, "a case the tracer does not watch still runs and fails"


def test_once():
    assert only_once() == "once"


@settings(max_examples=60, database=None, derandomize=True)
@given(st.integers())
def test_drawn(n):
    assert drawn(n) >= 0
"""


def test_a_run_traces_what_is_new_and_still_runs_every_case(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "mod.py").write_text(SOURCE, encoding="utf-8")
    (tmp_path / "test_mod.py").write_text(TESTS, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.coverage.run]\nbranch = true\n[tool.pytest]\npythonpath = ["src"]\n',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE", "PYTEST"))}
    env["COVERAGE_FILE"] = str(tmp_path / "data")
    proc = subprocess.run(
        [
            *(sys.executable, str(ROOT / "scripts" / "_traced_pytest.py"), "src", "--"),
            *("-q", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin", "test_mod.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 61 passed" in proc.stdout
    assert "test_classify[47]" in proc.stdout
    summary = proc.stdout.strip().splitlines()[-1]
    # 60 cases: traced until 8 in a row add nothing (n = 2 to 9), then one in 8.
    counts = re.fullmatch(
        r"coverage: (\d+) test cases traced, (\d+) not \(repetition\),"
        r" (\d+) Hypothesis examples not",
        summary,
    )
    assert counts is not None, summary
    traced, untraced_cases, untraced_examples = map(int, counts.groups())
    assert traced + untraced_cases == 62
    assert untraced_cases >= 40
    assert untraced_examples >= 20

    report = subprocess.run(
        [sys.executable, "-m", "coverage", "json", "-o", "-", "--data-file", "data"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (measured,) = json.loads(report.stdout)["files"].values()
    # Every line and both sides of each branch: the import (traced from the start), the
    # first cases, the lone test, and Hypothesis' first examples (a negative among them).
    assert measured["missing_lines"] == []
    assert measured["summary"]["missing_branches"] == 0
