"""scripts/_share_bytecode.py: bytecode goes only to the very file it was compiled from."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import shutil
import subprocess
import sys
from importlib.util import cache_from_source
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_share_bytecode", ROOT / "scripts" / "_share_bytecode.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bytecode_reaches_a_hard_link_of_its_source_and_nothing_else(tmp_path: Path) -> None:
    share = _module()
    store, first, second = tmp_path / "store", tmp_path / "a", tmp_path / "b"
    store.mkdir()
    for site in (first, second):
        (site / "pkg").mkdir(parents=True)
    source = first / "pkg" / "mod.py"
    source.write_text("VALUE = 1\n", encoding="utf-8")
    os.link(source, second / "pkg" / "mod.py")  # what uv's hard-linked installs give
    shutil.copy2(source, first / "pkg" / "copied.py")  # same text and mtime, another file
    os.link(first / "pkg" / "copied.py", first / "pkg" / "alias.py")
    shutil.copy2(source, second / "pkg" / "copied.py")
    for name in ("mod.py", "copied.py"):
        py_compile.compile(str(first / "pkg" / name), doraise=True)
    optimised = cache_from_source(str(source), optimization=1)
    shutil.copy2(cache_from_source(str(source)), optimised)

    assert share.keep_in(store, [first]) == 2  # mod and copied, not the .opt-1 file
    assert share.keep_in(store, [first]) == 0  # each file once
    assert share.link_from(store, [second]) == 1
    linked = Path(cache_from_source(str(second / "pkg" / "mod.py")))
    assert linked.samefile(cache_from_source(str(source)))
    # A copy with the same text is another file: it compiles its own.
    assert not Path(cache_from_source(str(second / "pkg" / "copied.py"))).exists()
    # Another name of a source that has bytecode gets it too (it is the same file).
    assert share.link_from(store, [first]) == 1
    assert Path(cache_from_source(str(first / "pkg" / "alias.py"))).exists()


def test_the_command_runs_and_its_exit_code_is_kept(tmp_path: Path) -> None:
    script = ROOT / "scripts" / "_share_bytecode.py"
    store = tmp_path / "store"
    # -S: no site-packages to walk; the command and its exit code are what is checked
    argv = [sys.executable, "-S", str(script), str(store), "--", sys.executable, "-S", "-c"]
    code = "import sys; print('ran'); sys.exit(3)"
    proc = subprocess.run([*argv, code], capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (3, "ran\n")
    assert store.is_dir()
    usage = subprocess.run(
        [sys.executable, "-S", str(script), str(store)], capture_output=True, text=True, timeout=60
    )
    assert usage.returncode == 2
    assert "STORE -- COMMAND" in usage.stderr
