"""The names Python imports a module by, before the standard library's or a tool's own.

A directory searched before the standard library (the one ``python3 -m pip``
starts in, a ``PYTHONPATH`` entry) replaces a standard module, a tool users run
as a module (``pip``, ``venv``, ``pytest``) or one a ``.pth`` file imports at
every start with a file of the same name: :func:`module_shadow_names`. An
anchored entry :data:`MODULE_SHADOWS` (alone, or after a directory:
``sub/`` + it) stands for all of them in its directory, so a root's answer holds
one entry per directory rather than thousands.
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import re
import sys

from ._files import read_regular_file

__all__ = [
    "MODULE_SHADOWS",
    "RUN_AS_MODULES",
    "module_shadow_names",
    "pth_line_modules",
    "pth_modules",
    "shadowed_names",
]

# An anchored entry's last component (a NUL: no file is named so) standing for every
# name of module_shadow_names() in its directory.
MODULE_SHADOWS = "\0python-module-shadows"

# tools users start as a module of whatever python they run (`python -m pip`)
RUN_AS_MODULES = ("pip", "setuptools", "pkg_resources", "wheel", "pytest", "_pytest", "venv",
                  "virtualenv", "pipx", "build", "twine", "mypy", "ruff", "black")  # fmt: skip

# what site-packages' .pth files of common interpreters import at every start
# (setuptools' distutils-precedence.pth, virtualenv's _virtualenv.pth)
_PTH_MODULES = ("_distutils_hack", "_virtualenv")
_PTH_IMPORT = re.compile(r"\bimport[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)")
_PTH_DYNAMIC = re.compile(r"(?:__import__|import_module)\([ \t]*[\"']([\w.]+)")
_PTH_READ = 256  # .pth files read, at most
_PTH_BYTES = 65536  # bytes read of each, at most


def _site_directories() -> list[str]:
    """This interpreter's site directories and its base interpreter's."""
    import site
    import sysconfig

    out = [*site.getsitepackages(), site.getusersitepackages()]
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    for name in ("purelib", "platlib"):
        out.append(sysconfig.get_paths(vars=base)[name])
    return list(dict.fromkeys(out))


def pth_modules() -> list[str]:
    """The top-level modules the site directories' ``.pth`` files import at every start.

    ``site`` runs each ``.pth`` line that starts with ``import``: PYTHONPATH's
    entries precede site-packages then, so a module of that name there runs in
    every python the user starts (an editable install's ``__editable___*_finder``).
    """
    names: list[str] = [*_PTH_MODULES]
    read = 0
    for directory in _site_directories():
        try:
            entries = sorted(os.listdir(directory))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".pth") or read >= _PTH_READ:
                continue
            read += 1
            data = read_regular_file(os.path.join(directory, entry), _PTH_BYTES)
            for line in (data or b"").decode("utf-8", "replace").splitlines():
                names += pth_line_modules(line)
    return list(dict.fromkeys(names))


def pth_line_modules(line: str) -> list[str]:
    """The top-level modules one ``.pth`` line imports (none unless ``site`` runs it)."""
    if not line.startswith(("import ", "import\t")):
        return []  # (a path entry)
    found = [m for g in _PTH_IMPORT.findall(line) for m in g.split(",")]
    found += _PTH_DYNAMIC.findall(line)
    return [m.strip().split(".")[0] for m in found if m.strip()]


@functools.lru_cache(maxsize=1)
def shadowed_names() -> tuple[str, ...]:
    """The top-level module names a directory searched first can replace (sorted)."""
    return tuple(sorted({*sys.stdlib_module_names, *RUN_AS_MODULES, *pth_modules(),
                         "sitecustomize", "usercustomize"}))  # fmt: skip


@functools.lru_cache(maxsize=1)
def module_shadow_names() -> tuple[frozenset[str], frozenset[str]]:
    """What replaces a standard module (or a tool run as one) in a directory searched first.

    ``(files, packages)``: a module of a :func:`shadowed_names` name with a suffix
    this interpreter imports (``re.py``, ``json.pyc``, an extension module), and
    the names whose package directory does, through its ``__init__`` in any form
    (``argparse/__init__.py``). A directory of such a name without an
    ``__init__`` is a namespace package, which never replaces a module (a
    project's ``build/`` or ``html/``). Lower case: compared folded.
    """
    names = shadowed_names()
    suffixes = importlib.machinery.all_suffixes()
    files = frozenset(f"{name}{suffix}".lower() for name in names for suffix in suffixes)
    return files, frozenset(name.lower() for name in names)
