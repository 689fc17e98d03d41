"""Run a command with the bytecode that other environments of the same test run compiled.

    python3 scripts/_share_bytecode.py STORE -- COMMAND...

scripts/test runs each package's tests in an environment of its own that uv makes for
that run (``uv run --isolated``). uv installs every environment's packages as hard links
to the files in its cache, so a module's source in one environment is the very file
(same inode, size and mtime) as in the next; Python still compiles each module the
first time it is imported in each environment, and nine environments compiled the MCP
SDK, pydantic, trio, pytest and the rest nine times (seconds of CPU each).

Before COMMAND, every source file of this environment's site-packages whose bytecode is
in STORE gets that ``.pyc`` hard-linked into its ``__pycache__`` (where Python looks
for it; Python checks it against the source's mtime and size as always, and compiles
again on a mismatch). After COMMAND, the ``.pyc`` files its processes wrote there join
STORE, keyed by the source file's identity (device, inode, size, mtime), so only the
same file ever gets them. Python writes a ``.pyc`` to a temporary name and renames it,
never in place, so a linked file is never changed under another environment. Exits
with COMMAND's exit code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TAG = sys.implementation.cache_tag


def _key(source: Path) -> str | None:
    try:
        st = source.stat()
    except OSError:
        return None
    return f"{st.st_dev}-{st.st_ino}-{st.st_size}-{st.st_mtime_ns}.{TAG}.pyc"


def _sites() -> list[Path]:
    # uv run --isolated --with puts the packages in more than one environment (the
    # project's, the --with layer's): every site-packages folder on the path.
    return sorted(
        {Path(p) for p in sys.path if Path(p).name == "site-packages" and Path(p).is_dir()}
    )


def link_from(store: Path, sites: list[Path]) -> int:
    """Link STORE's bytecode into the __pycache__ folders of SITES' sources; how many."""
    known = set(os.listdir(store))
    linked = 0
    for site in sites:
        for folder, dirs, files in os.walk(site):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if not name.endswith(".py"):
                    continue
                key = _key(Path(folder, name))
                if key not in known:
                    continue
                cache = Path(folder, "__pycache__")
                target = cache / f"{name[:-3]}.{TAG}.pyc"
                try:
                    cache.mkdir(exist_ok=True)
                    os.link(store / key, target)
                except OSError:  # already there, or a read-only folder: Python compiles
                    continue
                linked += 1
    return linked


def keep_in(store: Path, sites: list[Path]) -> int:
    """Add the bytecode compiled for SITES' sources to STORE; how many."""
    kept = 0
    suffix = f".{TAG}.pyc"
    for site in sites:
        for folder, _dirs, files in os.walk(site):
            if Path(folder).name != "__pycache__":
                continue
            for name in files:
                if not name.endswith(suffix) or name.count(".") != 2:
                    continue  # optimised (.opt-1) or pytest's rewritten test modules
                key = _key(Path(folder).parent / f"{name[: -len(suffix)]}.py")
                if key is None:
                    continue
                try:
                    os.link(Path(folder, name), store / key)
                except OSError:  # another environment kept the same file first
                    continue
                kept += 1
    return kept


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    store = Path(argv[0])
    store.mkdir(parents=True, exist_ok=True)
    sites = _sites()
    link_from(store, sites)
    code = subprocess.call(argv[2:])
    keep_in(store, sites)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
