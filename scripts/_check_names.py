"""Whether every distribution name in packages/*/pyproject.toml is free on PyPI or ours.

Run by ``scripts/release-check --check-names``. A name is ours when the root
pyproject.toml lists it under ``[tool.prism-release] owned`` (add each name there
after its first upload). Exit 1 when another project holds a name. When PyPI cannot
be reached, prints one line and exits 0, or exits 1 under PRISM_REQUIRE_INDEX=1
(a release must not go on without the answer).
"""

from __future__ import annotations

import os
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

INDEX = os.environ.get("PRISM_NAME_INDEX", "https://pypi.org/pypi")


def our_names(root: Path) -> list[str]:
    return sorted(
        tomllib.loads(p.read_text(encoding="utf-8"))["project"]["name"]
        for p in root.glob("packages/*/pyproject.toml")
    )


def exists(name: str) -> bool:
    """True when the index has a project of this name; OSError when it cannot answer."""
    try:
        with urllib.request.urlopen(f"{INDEX}/{name}/json", timeout=20):
            return True
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        raise OSError(f"HTTP {exc.code}") from exc


def main() -> int:
    root = Path.cwd()
    settings = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    owned = set(settings.get("tool", {}).get("prism-release", {}).get("owned", []))
    names = our_names(root)
    verdicts: list[tuple[str, str]] = []
    for name in names:
        try:
            taken = exists(name)
        except OSError as exc:  # URLError, timeouts and refused connections are OSErrors
            reason = getattr(exc, "reason", exc)
            if os.environ.get("PRISM_REQUIRE_INDEX") == "1":
                print(f"release-check: FAILED: cannot ask {INDEX} about {name}: {reason}")
                return 1
            print(f"release-check: names not checked: {INDEX} unreachable ({reason})")
            return 0
        verdicts.append((name, "ours" if name in owned else "taken" if taken else "free"))
    others = [name for name, verdict in verdicts if verdict == "taken"]
    if others:
        for name, verdict in verdicts:
            print(f"  {verdict:5}  {name}", file=sys.stderr)
        print(
            f"release-check: FAILED: another project holds {', '.join(others)} on PyPI; "
            "publish under another prefix, or list the name under [tool.prism-release] owned "
            "if it is ours (docs/release.md)",
            file=sys.stderr,
        )
        return 1
    counts = {v: sum(1 for _, x in verdicts if x == v) for v in ("free", "ours")}
    print(
        f"release-check: names ok ({counts['free']} free, {counts['ours']} ours on PyPI: "
        f"{', '.join(names)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
