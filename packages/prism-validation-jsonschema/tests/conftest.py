"""Shared fixtures: the official JSON Schema Test Suite, fetched once and cached.

The suite ships inside the ``jsonschema`` sdist on PyPI. It is downloaded with
``pip download --no-binary`` (pip is a dev dependency of this package) into the
repository's ignored ``.cache/`` folder on first use. If it cannot be fetched
the conformance tests fail loudly; they never pass silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import hypothesis
import pytest

SUITE_VERSION = "4.26.0"
_REPO = Path(__file__).resolve().parents[3]
_CACHE = _REPO / ".cache" / f"json-schema-test-suite-{SUITE_VERSION}"

_SUMMARY = pytest.StashKey[list[str]]()


def _fetch_suite() -> Path:
    tests = _CACHE / "tests"
    if (tests / "draft7").is_dir():
        return tests
    _CACHE.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=_CACHE.parent) as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"jsonschema=={SUITE_VERSION}",
            "-d",
            tmp,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        archives = list(Path(tmp).glob("jsonschema-*.tar.gz"))
        if done.returncode != 0 or not archives:
            pytest.fail(
                "could not download the JSON Schema Test Suite "
                f"(pip exit {done.returncode}): {done.stderr.strip()[-2000:]}",
                pytrace=False,
            )
        with tarfile.open(archives[0]) as archive:
            archive.extractall(tmp, filter="data")
        extracted = Path(tmp) / f"jsonschema-{SUITE_VERSION}" / "json"
        staged = Path(tmp) / "staged"
        shutil.move(str(extracted), staged)
        try:
            os.replace(staged, _CACHE)
        except OSError:
            if not (tests / "draft7").is_dir():  # not another run winning the race
                raise
    return tests


@pytest.fixture(scope="session")
def json_schema_test_suite() -> Path:
    """The ``tests`` folder of the official JSON Schema Test Suite."""
    return _fetch_suite()


@pytest.fixture(scope="session")
def conformance_summary(pytestconfig: pytest.Config) -> list[str]:
    """Lines printed in the terminal summary, whatever the capture mode."""
    return pytestconfig.stash.setdefault(_SUMMARY, [])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the conformance counts collected by the tests."""
    lines = terminalreporter.config.stash.get(_SUMMARY, [])
    if lines:
        terminalreporter.section("JSON Schema Test Suite through prism.validation.jsonschema")
        for line in lines:
            terminalreporter.write_line(line)


# Hypothesis without its per-example deadline: a wall-clock limit fails on a loaded
# machine (scripts/test runs two packages at a time); speed targets live in benchmarks/.
hypothesis.settings.register_profile("prism", deadline=None)
hypothesis.settings.load_profile("prism")
