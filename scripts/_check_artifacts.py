"""Check every built wheel and sdist against its package: metadata, licence, file list.

Run by ``scripts/release-check`` (and by tests/test_release_artifacts.py) as
``python scripts/_check_artifacts.py DIST``, from the repository root. First it takes
out of each sdist the ``pyproject.toml.orig`` that uv_build (0.12 and later) leaves
beside the normalised ``pyproject.toml``; then, for each package in packages/*:

- exactly one wheel and one sdist of its version;
- the wheel holds the package's own ``prism/<sub>/`` files (every source file, and
  nothing else: no ``prism/__init__.py``, no cache, no stray) and a dist-info of
  METADATA, WHEEL, RECORD, ``licenses/LICENSE`` (and entry_points.txt when it has
  scripts); the sdist holds PKG-INFO, pyproject.toml, README.md, LICENSE and the
  same source files under ``src/``; both LICENSE files are the repository's;
- METADATA: name, version, ``Requires-Python: >=3.11``, ``License-Expression: MIT``,
  an author, Homepage/Source/Issues/Documentation URLs on the repository named in
  ``[tool.prism-release] repository``, the classifiers a user filters on
  (development status, operating system, Python 3 and one per supported minor,
  Typed), a README, every requirement lower-bounded, ours at a version built here.

Prints one line per artifact (its file count and what besides the code it carries)
and every problem; exits 1 when there is one.
"""

from __future__ import annotations

import gzip
import io
import re
import sys
import tarfile
import tomllib
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

STRAYS_THE_BACKEND_ADDS = ("pyproject.toml.orig",)
NAMESPACE_INITS = ("prism/__init__.py", "prism/validation/__init__.py", "prism/coding/__init__.py")
LOWER_BOUND = re.compile(r"(>=|==|~=)\s*\d")
SUPPORTED_MINORS = ("3.11", "3.12", "3.13")
URL_LABELS = ("Homepage", "Source", "Issues", "Documentation")


def strip_strays(dist: Path) -> list[str]:
    """Rewrite each sdist without the files the backend adds that belong to no one."""
    removed: list[str] = []
    for sdist in sorted(dist.glob("*.tar.gz")):
        with tarfile.open(sdist) as tar:
            members = tar.getmembers()
            keep = [m for m in members if m.name.rsplit("/", 1)[-1] not in STRAYS_THE_BACKEND_ADDS]
            if len(keep) == len(members):
                continue
            payload = {m.name: tar.extractfile(m).read() for m in keep if m.isfile()}  # type: ignore[union-attr]
        buffer = io.BytesIO()
        # mtime 0 in the gzip header: the same input gives the same bytes.
        with (
            gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as out,
        ):
            for member in keep:
                out.addfile(member, io.BytesIO(payload[member.name]) if member.isfile() else None)
        sdist.write_bytes(buffer.getvalue())
        removed += [f"{sdist.name}: {m.name}" for m in members if m not in keep]
    return removed


def _source_files(package: Path, module: str) -> set[str]:
    """Every file of the package's own tree, relative to src/ (caches left out)."""
    src = package / "src"
    tree = src / module.replace(".", "/")
    return {
        str(f.relative_to(src))
        for f in tree.rglob("*")
        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc"
    }


def _check_metadata(
    where: str, metadata: Message, project: dict, repository: str, ours: dict[str, str]
) -> list[str]:
    problems: list[str] = []
    name, version = project["name"], project["version"]

    def want(condition: bool, what: str) -> None:
        if not condition:
            problems.append(f"{where}: {what}")

    found_name = metadata.get("Name", "").replace("_", "-").lower()
    want(found_name == name, f"Name is {metadata.get('Name')!r}")
    want(metadata.get("Version") == version, f"Version is {metadata.get('Version')!r}")
    want(
        metadata.get("Requires-Python") == ">=3.11",
        f"Requires-Python is {metadata.get('Requires-Python')!r}",
    )
    want(metadata.get("License-Expression") == "MIT", "License-Expression is not MIT")
    want(metadata.get_all("License-File") == ["LICENSE"], "License-File is not LICENSE")
    want(bool(metadata.get("Author") or metadata.get("Author-email")), "no author")
    want(bool(metadata.get("Summary")), "no summary")
    want(bool(str(metadata.get_payload()).strip()), "no long description (README)")
    want(
        metadata.get("Description-Content-Type") == "text/markdown",
        "the README is not declared as markdown",
    )
    urls = {
        label.strip(): url.strip()
        for label, _, url in (u.partition(",") for u in metadata.get_all("Project-URL") or [])
    }
    for label in URL_LABELS:
        url = urls.get(label, "")
        want(url.startswith(repository), f"Project-URL {label} is {url!r}, not on {repository}")
    classifiers = metadata.get_all("Classifier") or []
    want(any(c.startswith("Development Status :: ") for c in classifiers), "no Development Status")
    want(any(c.startswith("Operating System :: ") for c in classifiers), "no Operating System")
    for minor in SUPPORTED_MINORS:
        want(
            f"Programming Language :: Python :: {minor}" in classifiers,
            f"no Python {minor} classifier",
        )
    want("Typing :: Typed" in classifiers, "no Typing :: Typed classifier")
    want(
        not any(c.startswith("License :: ") for c in classifiers),
        "a License classifier beside License-Expression (PEP 639 forbids both)",
    )
    for requirement in metadata.get_all("Requires-Dist") or []:
        spec = requirement.split(";")[0]
        dep = re.split(r"[\s<>=!~\[(;]", spec, maxsplit=1)[0].lower().replace("_", "-")
        want(bool(LOWER_BOUND.search(spec)), f"requirement {requirement!r} has no lower bound")
        if dep in ours:
            wanted = re.search(r">=\s*([\d.]+)", spec)
            if wanted is None:
                problems.append(f"{where}: requirement {requirement!r} needs '>=X.Y'")
            elif tuple(map(int, wanted.group(1).split("."))) > tuple(
                map(int, ours[dep].split("."))
            ):
                problems.append(f"{where}: needs {spec} but this build makes {ours[dep]}")
    return problems


def check(dist: Path, root: Path) -> list[str]:
    """Every problem of the artifacts in ``dist`` (printing one line per artifact)."""
    settings = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    repository = settings["tool"]["prism-release"]["repository"]
    licence = (root / "LICENSE").read_bytes()
    packages = sorted(p.parent for p in root.glob("packages/*/pyproject.toml"))
    projects = {}
    for package in packages:
        data = tomllib.loads((package / "pyproject.toml").read_text(encoding="utf-8"))
        projects[package] = data
    ours = {d["project"]["name"]: d["project"]["version"] for d in projects.values()}
    problems: list[str] = []
    expected_artifacts: set[str] = set()
    for package, data in projects.items():
        project = data["project"]
        name, version = project["name"], project["version"]
        stem = name.replace("-", "_")
        module = data.get("tool", {}).get("uv", {}).get("build-backend", {}).get("module-name")
        wheels = sorted(dist.glob(f"{stem}-{version}-*.whl"))
        sdists = sorted(dist.glob(f"{stem}-{version}.tar.gz"))
        expected_artifacts.update(a.name for a in wheels + sdists)
        if len(wheels) != 1 or len(sdists) != 1:
            problems.append(
                f"{name}: expected one wheel and one sdist of {version}, found "
                f"{[a.name for a in wheels + sdists]}"
            )
            continue
        if not module:
            problems.append(f"{name}: [tool.uv.build-backend] module-name is not set")
            continue
        sources = _source_files(package, module)
        odd = sorted(s for s in sources if not s.endswith((".py", "/py.typed")))
        if odd:
            problems.append(f"{name}: files that are neither code nor py.typed: {odd[:5]}")
        package_dir = module.replace(".", "/") + "/"
        for required in (package_dir + "__init__.py", package_dir + "py.typed"):
            if required not in sources:
                problems.append(f"{name}: {required} is missing from the source tree")

        # The wheel: the source files, and a dist-info with exactly what a wheel needs.
        info = f"{stem}-{version}.dist-info/"
        wanted_info = {"METADATA", "WHEEL", "RECORD", "licenses/LICENSE"}
        if project.get("scripts"):
            wanted_info.add("entry_points.txt")
        with zipfile.ZipFile(wheels[0]) as wheel:
            files = {f for f in wheel.namelist() if not f.endswith("/")}
            metadata = HeaderParser().parsestr(wheel.read(info + "METADATA").decode("utf-8"))
            wheel_licence = (
                wheel.read(info + "licenses/LICENSE")
                if (info + "licenses/LICENSE" in files)
                else b""
            )
            scripts = (
                wheel.read(info + "entry_points.txt").decode()
                if info + "entry_points.txt" in files
                else ""
            )
        code = {f for f in files if not f.startswith(info)}
        extra = sorted(
            (code - sources)
            | {f for f in files if f.startswith(info)} - {info + w for w in wanted_info}
        )
        missing = sorted((sources - code) | {info + w for w in wanted_info} - files)
        for bad in NAMESPACE_INITS:
            if bad in files:
                problems.append(f"{wheels[0].name}: ships {bad} (it would break the namespace)")
        if extra:
            problems.append(f"{wheels[0].name}: files that do not belong: {extra[:8]}")
        if missing:
            problems.append(f"{wheels[0].name}: missing {missing[:8]}")
        if wheel_licence != licence:
            problems.append(f"{wheels[0].name}: its LICENSE is not the repository's LICENSE")
        for script, target in project.get("scripts", {}).items():
            if f"{script} = {target}" not in scripts:
                problems.append(f"{wheels[0].name}: the `{script}` console script is missing")
        problems += _check_metadata(wheels[0].name, metadata, project, repository, ours)

        # The sdist: PKG-INFO, the build inputs, the licence and the same source files.
        with tarfile.open(sdists[0]) as tar:
            top = f"{stem}-{version}/"
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            wrong_top = sorted(n for n in members if not n.startswith(top))
            names = {n.removeprefix(top) for n in members}
            sdist_licence = (
                tar.extractfile(members[top + "LICENSE"]).read()  # type: ignore[union-attr]
                if top + "LICENSE" in members
                else b""
            )
            pkg_info = (
                HeaderParser().parsestr(
                    tar.extractfile(members[top + "PKG-INFO"]).read().decode()  # type: ignore[union-attr]
                )
                if top + "PKG-INFO" in members
                else Message()
            )
        wanted = {"PKG-INFO", "pyproject.toml", "README.md", "LICENSE"} | {
            f"src/{s}" for s in sources
        }
        if wrong_top:
            problems.append(f"{sdists[0].name}: files outside {top}: {wrong_top[:5]}")
        if names - wanted:
            strays = sorted(names - wanted)[:8]
            problems.append(f"{sdists[0].name}: files that do not belong: {strays}")
        if wanted - names:
            problems.append(f"{sdists[0].name}: missing {sorted(wanted - names)[:8]}")
        if sdist_licence != licence:
            problems.append(f"{sdists[0].name}: its LICENSE is not the repository's LICENSE")
        problems += _check_metadata(sdists[0].name, pkg_info, project, repository, ours)

        besides = sorted(f.removeprefix(info) for f in files if f.startswith(info))
        print(
            f"  {wheels[0].name}: {len(code)} files in {package_dir} + {', '.join(besides)}\n"
            f"  {sdists[0].name}: {len(names & {f'src/{s}' for s in sources})} files in "
            f"src/{package_dir} + {', '.join(sorted(names - {f'src/{s}' for s in sources}))}"
        )
    unknown = sorted(
        a.name
        for a in dist.iterdir()
        if a.name not in expected_artifacts and not a.name.startswith(".")  # uv's .gitignore
    )
    if unknown:
        problems.append(f"artifacts of no package here: {unknown}")
    return problems


def main() -> int:
    dist = Path(sys.argv[1])
    removed = strip_strays(dist)
    if removed:
        print(f"  took uv_build's pyproject.toml.orig out of {len(removed)} sdists")
    problems = check(dist, Path.cwd())
    for problem in problems:
        print(f"  FAIL {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
