"""The CLI's sandbox (``prism run``, ``chat``, ``serve``): warmed, the same protected list."""

from __future__ import annotations

import shutil
import threading
from typing import TYPE_CHECKING, Any

import pytest
import trio

from prism.cli import load_config
from prism.cli._toolset import _coding_tools
from prism.coding.security import _implied
from prism.core import DispatchOptions, ToolCall, create_tool_registry, dispatch_tool_call

if TYPE_CHECKING:
    from pathlib import Path

CONFIG = """
[workspace]
roots = ["repo"]
sandbox = "bubblewrap"
protected_paths = ["team.cfg"]
"""


async def test_the_first_shell_call_walks_nothing_and_keeps_the_configured_protected_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tools the CLI builds (``prism serve`` builds them the same way) find what the
    roots protect on a thread of their own when they are made: the first confined call's
    copy-back lists no directory (before: every one). Its sandbox leaves out the
    configuration's own protected paths, as the policy asks for them (before: only the
    default list's were left out, so a confined program's ``team.cfg`` came back)."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (scripts/test installs it)")
    repo = tmp_path / "repo"
    for n in range(4):
        (repo / f"d{n}" / "x").mkdir(parents=True)
    (tmp_path / "prism.toml").write_text(CONFIG, encoding="utf-8")
    config = load_config(tmp_path / "prism.toml")
    # listings kept though just made, no directory watched: a walk finding every
    # listing kept lists nothing, one that was not warmed lists every directory
    monkeypatch.setattr(_implied, "_RACY_NS", -(10**12))
    monkeypatch.setattr(_implied, "local_device", lambda device: False)
    listed: list[str] = []
    warmed = threading.Event()
    real_list, real_warm = _implied._list, _implied._warm

    def counting(*args: Any) -> Any:
        listed.append(threading.current_thread().name)
        return real_list(*args)

    def warm(*args: Any) -> None:
        try:
            real_warm(*args)
        finally:
            warmed.set()

    monkeypatch.setattr(_implied, "_list", counting)
    monkeypatch.setattr(_implied, "_warm", warm)

    tools, label = await _coding_tools(config)  # what open_toolset and prism serve build
    if label != "bubblewrap":  # pragma: no cover - depends on the machine
        pytest.skip(f"bubblewrap cannot isolate here: {label}")
    await trio.to_thread.run_sync(warmed.wait, 30)
    assert set(listed) == {"prism-warm"}
    before = len(listed)
    command = "python3 -c \"open('team.cfg','w').write('x'); open('d0/made','w').write('y')\""
    result = await dispatch_tool_call(
        ToolCall(id="1", name="shell", arguments={"command": command}),
        DispatchOptions(registry=create_tool_registry(tools)),
    )
    assert not result.is_error, result.joined_text
    assert (repo / "d0" / "made").read_text() == "y"
    assert not (repo / "team.cfg").exists()
    assert "team.cfg" in result.joined_text  # reported as left out
    assert len(listed) == before  # the call's copy-back listed nothing
