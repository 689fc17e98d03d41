"""What would be published: every wheel and sdist, built here, and the name check.

The artifacts are built once (``uv build --all-packages``, about a second) and
checked by scripts/_check_artifacts.py, the checker scripts/release-check runs;
each attack below hands it an artifact with one thing wrong and expects that thing
named. The name check (scripts/_check_names.py) runs against a package index served
on 127.0.0.1 that answers the way PyPI does.
"""

from __future__ import annotations

import contextlib
import http.server
import importlib.util
import io
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import tomllib
import zipfile
from email.parser import HeaderParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


artifacts = _script("_check_artifacts")


def _projects() -> dict[str, dict[str, Any]]:
    return {
        p.parent.name: tomllib.loads(p.read_text(encoding="utf-8"))["project"]
        for p in sorted(ROOT.glob("packages/*/pyproject.toml"))
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("building the artifacts needs uv on PATH")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [uv, "build", "--all-packages", "--quiet", "--out-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture
def dist(built: Path, tmp_path: Path) -> Path:
    """A copy of the built artifacts that a test may spoil."""
    copy = tmp_path / "dist"
    shutil.copytree(built, copy)
    return copy


def _check(dist: Path) -> list[str]:
    artifacts.strip_strays(dist)
    return list(artifacts.check(dist, ROOT))


def test_every_artifact_passes_the_release_check(dist: Path) -> None:
    assert _check(dist) == []
    assert len(list(dist.glob("*.whl"))) == len(list(dist.glob("*.tar.gz"))) == len(_projects())


def test_the_backends_stray_pyproject_orig_is_taken_out_of_every_sdist(dist: Path) -> None:
    sdists = sorted(dist.glob("*.tar.gz"))
    removed = artifacts.strip_strays(dist)
    assert len(removed) == len(sdists)  # uv_build leaves one in each
    for sdist in sdists:
        with tarfile.open(sdist) as tar:
            names = tar.getnames()
            pyproject = tar.extractfile(next(n for n in names if n.endswith("/pyproject.toml")))
            assert pyproject is not None
            assert tomllib.loads(pyproject.read().decode())["project"]["license"] == "MIT"
        assert not any(n.endswith(".orig") for n in names), sdist.name
    assert artifacts.strip_strays(dist) == []  # and the sdists stay readable archives


def test_each_wheel_says_what_a_user_filters_on(built: Path) -> None:
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License")
    for folder, project in _projects().items():
        stem = project["name"].replace("-", "_")
        assert project["name"] == "prismgate-" + folder.removeprefix("prism-")
        (wheel,) = built.glob(f"{stem}-*.whl")
        with zipfile.ZipFile(wheel) as zf:
            info = f"{stem}-{project['version']}.dist-info/"
            metadata = HeaderParser().parsestr(zf.read(info + "METADATA").decode())
            assert zf.read(info + "licenses/LICENSE").decode() == licence
        classifiers = metadata.get_all("Classifier") or []
        assert metadata["License-Expression"] == "MIT"
        assert "Development Status :: 3 - Alpha" in classifiers
        # The sandbox and process-tree code read /proc and use Linux namespaces.
        linux = folder not in {"prism-validation-jsonschema", "prism-providers"}
        expected_os = "POSIX :: Linux" if linux else "OS Independent"
        assert f"Operating System :: {expected_os}" in classifiers, folder
        assert metadata["Requires-Python"] == ">=3.11"


def test_every_package_folder_ships_the_repository_licence() -> None:
    licence = (ROOT / "LICENSE").read_bytes()
    for folder in ROOT.glob("packages/*/pyproject.toml"):
        assert (folder.parent / "LICENSE").read_bytes() == licence, folder.parent.name


# Attacks: one thing wrong in one artifact, and the check must name it.


def _rewrite_wheel(
    wheel: Path,
    *,
    add: dict[str, bytes] | None = None,
    drop: Callable[[str], bool] = lambda _: False,
    edit_metadata: Callable[[str], str] | None = None,
) -> None:
    with zipfile.ZipFile(wheel) as zf:
        entries = [(i.filename, zf.read(i)) for i in zf.infolist() if not drop(i.filename)]
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in entries:
            if edit_metadata is not None and name.endswith(".dist-info/METADATA"):
                data = edit_metadata(data.decode()).encode()
            zf.writestr(name, data)
        for name, data in (add or {}).items():
            zf.writestr(name, data)


def _rewrite_sdist(sdist: Path, add: dict[str, bytes]) -> None:
    with tarfile.open(sdist) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else b"") for m in tar]  # type: ignore[union-attr]
        top = members[0][0].name.split("/")[0]
    with tarfile.open(sdist, "w:gz") as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
        for name, data in add.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _core_wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("prismgate_core-*.whl")
    return wheel


@pytest.mark.parametrize(
    ("spoil", "named"),
    [
        (
            {"add": {"prism/__init__.py": b""}},
            "ships prism/__init__.py (it would break the namespace)",
        ),
        (
            {"add": {"prism/core/notes.txt": b"x"}},
            "files that do not belong: ['prism/core/notes.txt'",
        ),
        ({"add": {"tests/test_x.py": b""}}, "files that do not belong: ['tests/test_x.py'"),
        ({"drop": lambda n: n.endswith("licenses/LICENSE")}, "licenses/LICENSE"),
        ({"drop": lambda n: n.endswith("/_dispatch.py")}, "missing ['prism/core/_dispatch.py'"),
        (
            {
                "edit_metadata": lambda m: m.replace(
                    "License-Expression: MIT", "License-Expression: GPL-3.0"
                )
            },
            "License-Expression is not MIT",
        ),
        (
            {
                "edit_metadata": lambda m: m.replace(
                    "Classifier: Typing :: Typed",
                    "Classifier: License :: OSI Approved :: MIT License",
                )
            },
            "a License classifier",
        ),
        (
            {
                "edit_metadata": lambda m: m.replace(
                    "Requires-Dist: trio>=0.35", "Requires-Dist: trio"
                )
            },
            "requirement 'trio' has no lower bound",
        ),
        (
            {
                "edit_metadata": lambda m: m.replace(
                    "Classifier: Operating System :: POSIX :: Linux\n", ""
                )
            },
            "no Operating System",
        ),
        (
            {
                "edit_metadata": lambda m: m.replace(
                    "Project-URL: Source, https://", "Project-URL: Source, http://evil.example/"
                )
            },
            "Project-URL Source is 'http://evil.example/",
        ),
    ],
    ids=[
        "namespace-init",
        "stray-data-file",
        "stray-top-level",
        "no-licence",
        "missing-module",
        "wrong-licence",
        "licence-classifier",
        "unbounded-requirement",
        "no-os",
        "foreign-url",
    ],
)
def test_a_spoiled_wheel_is_named(dist: Path, spoil: dict[str, Any], named: str) -> None:
    wheel = _core_wheel(dist)
    _rewrite_wheel(wheel, **spoil)
    problems = _check(dist)
    assert problems, "the spoiled wheel passed"
    assert all(p.startswith(wheel.name) for p in problems), problems
    assert any(named in p for p in problems), problems


def test_a_licence_that_is_not_ours_is_named(dist: Path) -> None:
    wheel = _core_wheel(dist)
    _rewrite_wheel(
        wheel,
        drop=lambda n: n.endswith("licenses/LICENSE"),
        add={f"{wheel.name.split('-py3')[0]}.dist-info/licenses/LICENSE": b"All rights reserved."},
    )
    assert _check(dist) == [f"{wheel.name}: its LICENSE is not the repository's LICENSE"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ("tests/test_core.py", "files that do not belong: ['tests/test_core.py']"),
        (".env", "files that do not belong: ['.env']"),
        ("src/prism/__init__.py", "files that do not belong: ['src/prism/__init__.py']"),
    ],
)
def test_a_spoiled_sdist_is_named(dist: Path, extra: str, named: str) -> None:
    (sdist,) = dist.glob("prismgate_core-*.tar.gz")
    _rewrite_sdist(sdist, {extra: b"x"})
    problems = _check(dist)
    assert problems == [f"{sdist.name}: {named}"]


def test_a_missing_or_foreign_artifact_is_named(dist: Path) -> None:
    (sdist,) = dist.glob("prismgate_mcp-*.tar.gz")
    sdist.unlink()
    (dist / "prism_core-0.1.0-py3-none-any.whl").write_bytes(b"")
    problems = _check(dist)
    assert any(p.startswith("prismgate-mcp: expected one wheel and one sdist") for p in problems)
    assert "artifacts of no package here: ['prism_core-0.1.0-py3-none-any.whl']" in problems


# The name check, against an index on 127.0.0.1 that answers like PyPI's JSON API.


@pytest.fixture
def index() -> Iterator[tuple[str, set[str]]]:
    taken: set[str] = set()

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            name = self.path.strip("/").split("/")[-2]
            self.send_response(200 if name in taken else 404)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/pypi", taken
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _check_names(
    index_url: str, *, cwd: Path = ROOT, require: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PRISM_NAME_INDEX": index_url,
        "PRISM_REQUIRE_INDEX": "1" if require else "0",
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "_check_names.py")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_free_names_pass(index: tuple[str, set[str]]) -> None:
    proc = _check_names(index[0])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"release-check: names ok ({len(_projects())} free, 0 ours")


def test_a_name_another_project_holds_fails_the_release(index: tuple[str, set[str]]) -> None:
    url, taken = index
    taken.add("prismgate-gateway")
    proc = _check_names(url)
    assert proc.returncode == 1
    assert "another project holds prismgate-gateway on PyPI" in proc.stderr


def test_a_name_listed_as_owned_is_ours(index: tuple[str, set[str]], tmp_path: Path) -> None:
    url, taken = index
    taken.add("prismgate-core")
    shutil.copytree(
        ROOT / "packages", tmp_path / "packages", ignore=shutil.ignore_patterns("src", "tests")
    )
    root = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        root.replace("owned = []", 'owned = ["prismgate-core"]'), encoding="utf-8"
    )
    proc = _check_names(url, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1 ours" in proc.stdout


@contextlib.contextmanager
def _refusing_port() -> Iterator[int]:
    """A 127.0.0.1 port that is bound but never listened on: a connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def test_an_unreachable_index_is_one_line_or_a_failure_when_required() -> None:
    with _refusing_port() as port:
        url = f"http://127.0.0.1:{port}/pypi"
        proc = _check_names(url)
        assert proc.returncode == 0
        assert proc.stdout.count("\n") == 1
        assert proc.stdout.startswith(f"release-check: names not checked: {url} unreachable")
        proc = _check_names(url, require=True)
        assert proc.returncode == 1
        assert "FAILED: cannot ask" in proc.stdout
